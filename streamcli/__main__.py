from streamcli.console import main

main()
