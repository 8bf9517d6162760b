from cnki_mcp.cli import main

main()
