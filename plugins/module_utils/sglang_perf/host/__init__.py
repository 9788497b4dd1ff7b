"""What runs on the host beside the server: the deploy lock (``lock``), the measurement lock
(``measurelock``), the weights' commits (``weights``), which server a command line launches
(``launchers``) and the watch (``watch``)."""
