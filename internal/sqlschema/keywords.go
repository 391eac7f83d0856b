package sqlschema

// reservedWords are the PostgreSQL keywords that cannot name a schema in
// pgsched's SQL: every keyword of the categories reserved (R), reserved but
// usable as a function or type name (T) and unreserved but not usable as a
// function or type name (C) in pg_get_keywords(). As a schema qualifier
// ("order.heads", "between.partition_of(...)") each one is a syntax error
// somewhere in the migrations or queries, while every unreserved (U)
// keyword works. The list is PostgreSQL 15's, checked by migrating a schema
// of each keyword, plus the words later releases added to those categories;
// a test compares it with the server's pg_get_keywords().
var reservedWords = map[string]struct{}{}

func init() {
	for _, w := range []string{
		"all", "analyse", "analyze", "and", "any", "array", "as", "asc", "asymmetric", "authorization",
		"between", "bigint", "binary", "bit", "boolean", "both",
		"case", "cast", "char", "character", "check", "coalesce", "collate", "collation", "column",
		"concurrently", "constraint", "create", "cross", "current_catalog", "current_date", "current_role",
		"current_schema", "current_time", "current_timestamp", "current_user",
		"dec", "decimal", "default", "deferrable", "desc", "distinct", "do",
		"else", "end", "except", "exists", "extract",
		"false", "fetch", "float", "for", "foreign", "freeze", "from", "full",
		"grant", "greatest", "group", "grouping",
		"having",
		"ilike", "in", "initially", "inner", "inout", "int", "integer", "intersect", "interval", "into", "is", "isnull",
		"join",
		"lateral", "leading", "least", "left", "like", "limit", "localtime", "localtimestamp",
		"national", "natural", "nchar", "none", "normalize", "not", "notnull", "null", "nullif", "numeric",
		"offset", "on", "only", "or", "order", "out", "outer", "overlaps", "overlay",
		"placing", "position", "precision", "primary",
		"real", "references", "returning", "right", "row",
		"select", "session_user", "setof", "similar", "smallint", "some", "substring", "symmetric",
		"table", "tablesample", "then", "time", "timestamp", "to", "trailing", "treat", "trim", "true",
		"union", "unique", "user", "using",
		"values", "varchar", "variadic", "verbose",
		"when", "where", "window", "with",
		"xmlattributes", "xmlconcat", "xmlelement", "xmlexists", "xmlforest", "xmlnamespaces", "xmlparse",
		"xmlpi", "xmlroot", "xmlserialize", "xmltable",
		// PostgreSQL 16 and 17.
		"json_array", "json_arrayagg", "json_exists", "json_object", "json_objectagg", "json_query",
		"json_scalar", "json_serialize", "json_table", "json_value", "merge_action", "system_user",
	} {
		reservedWords[w] = struct{}{}
	}
}
