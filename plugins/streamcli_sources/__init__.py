"""streamcli's built-in sources. Each registers through the ``streamcli.plugins`` entry point, like yours."""
