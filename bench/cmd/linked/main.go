// Command linked links the modules jobs is built on (modernc.org/sqlite,
// sqlx, goose, urfave/cli and, unless built with the nomcp tag, the MCP Go
// SDK) and does nothing. The benchmark harness times it as the start-up
// cost of that stack: their package initialisation and the size of the
// binary they make, which every jobs command pays before it does anything.
package main

import (
	_ "github.com/jmoiron/sqlx"
	_ "github.com/pressly/goose/v3"
	_ "github.com/urfave/cli/v2"
	_ "modernc.org/sqlite"
)

func main() {}
