-- The newest migration applied (0: none).
SELECT coalesce(max(version), 0) FROM hookclaim_schema_migrations
