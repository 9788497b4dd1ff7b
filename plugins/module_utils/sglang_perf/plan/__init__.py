"""What a host runs and how it is gated, decided on the controller before anything changes: the
deploy plan (``deploy``), profiles and their bases (``inherit``), the flag tables (``profile``), a
profile's drafter (``drafter``), the memory budget and roofline (``capacity``), multi-node topology
and rollout batches (``fleet``), the gate plan's cases (``gate``) and the comparison's (``comparison``)."""
