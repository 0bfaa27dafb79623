-- Records migration $1 ($2) as applied.
INSERT INTO hookclaim_schema_migrations (version, name) VALUES ($1, $2)
