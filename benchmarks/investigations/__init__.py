"""One-off investigations of the engine (profiles, prototypes); not part of `make bench`."""
