// Package db embeds pgsched's SQL so every binary carries the schema it
// needs: the numbered goose migrations (tables, indexes, sequences) and
// the functions and views, one per file, that the migrator applies after
// them.
package db

import "embed"

// Migrations holds migrations/*.sql, applied in order by goose.
//
//go:embed migrations/*.sql
var Migrations embed.FS

// Objects holds functions/*.sql and views/*.sql: each file creates or
// replaces one function (with its overloads) or one view. citus/ holds
// what a schema distributed over Citus gets instead or besides: whole
// functions and views of the same names or its own, and custom_plans.sql.
//
//go:embed functions/*.sql views/*.sql citus/functions/*.sql citus/views/*.sql citus/custom_plans.sql
var Objects embed.FS
