"""Deciding from figures: a run's and a plan's verdict and its text (``verdict``), what the server
says judged (``quality``), the action (``decision``), why a figure moved (``attribution``),
thresholds from runs (``calibration``), the one rule that picks a winner and its cost order
(``selection``), a setting and a profile read as one (``setting``), the tuner's search and answer
(``tune``) and how a candidate's launch failed (``tune_launch``)."""
