"""What is kept of a run: the gate history and its baseline (``history``), the Prometheus textfile
(``exposition``) and the host's fingerprint (``fingerprint``)."""
