"""What a host runs and how it is gated, decided on the controller before anything changes: the
deploy plan (``deploy``, one builder per part) and its parts' types (``parts``), profiles and their
bases (``inherit``), the flag tables (``profile``), a profile's drafter (``drafter``), the memory
budget and roofline (``capacity``), multi-node topology and rollout batches (``fleet``), the gate
plan's cases (``gate``) and the comparison's (``comparison``)."""
