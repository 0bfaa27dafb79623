-- Whether hookclaim has ever migrated this database.
SELECT to_regclass('hookclaim_schema_migrations') IS NOT NULL
