"""streamcli's built-in sources. Each registers through the ``streamcli.plugins`` entry point, as yours would."""
