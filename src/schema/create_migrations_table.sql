-- Which migrations this database has applied.
CREATE TABLE IF NOT EXISTS hookclaim_schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- The record of the schema is the owner's alone. Default privileges give the application role
-- data rights on every table the owner makes (sql/roles.sql), this one included: take back its
-- writes, and anyone else's but the owner's, so that only the role that migrates can change
-- it. Reading it stays allowed: a function that never migrates checks the version there.
DO $revoke$
DECLARE
    grantee regrole;
BEGIN
    FOR grantee IN
        SELECT DISTINCT a.grantee::regrole
          FROM pg_class c, aclexplode(c.relacl) a
         WHERE c.oid = 'hookclaim_schema_migrations'::regclass
           AND a.grantee NOT IN (0, c.relowner)
           AND a.privilege_type IN ('INSERT', 'UPDATE', 'DELETE', 'TRUNCATE')
    LOOP
        EXECUTE format('REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON hookclaim_schema_migrations '
                       'FROM %s', grantee);
    END LOOP;
END
$revoke$
