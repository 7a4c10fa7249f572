"""Worker processes: starting them (``start``, ``server``), their loop and end (``worker``), the loader's side
(``pool``, ``failures``) and the producers' one interface, in process or not (``producers``)."""
