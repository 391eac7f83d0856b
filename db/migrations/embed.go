// Package migrations embeds pgsched's goose migrations so every binary
// carries the schema it needs.
package migrations

import "embed"

// FS holds the numbered goose SQL files.
//
//go:embed *.sql
var FS embed.FS
