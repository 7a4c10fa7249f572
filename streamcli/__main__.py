from streamcli.cli import main

main()
