-- hookclaim's database roles: an owner that applies the migrations and the processor's setup,
-- and an application role with data rights only on hookclaim's tables, which both functions do
-- everything else with: deliveries, re-drives, replays, purge and stats.
--
-- Run once with psql as an administrator (the RDS master user), connected to the database
-- hookclaim uses. Running it again is safe: it sets the passwords and grants again.
--
--   psql "host=<endpoint> port=5432 dbname=<database> user=<master user> sslmode=require" \
--        -v owner_password='<owner password>' -v app_password='<app password>' \
--        -f sql/roles.sql
--
-- The same passwords go into the two secrets the template takes (DatabaseOwnerSecretArn,
-- DatabaseSecretArn), as {"username": "...", "password": "..."}. The retention function holds
-- both: the owner's only to migrate (DATABASE_OWNER_SECRET_ARN), the application role's for its
-- work; the webhook function holds the application role's alone.
--
-- IAM variant (DbIamAuth=true, connecting straight to the database): add -v iam=1 and leave
-- out app_password. The application role then has no password and is granted rds_iam, so it
-- can only log in with an IAM token. Through an RDS Proxy the proxy logs in to the database
-- with the secret's password, so there keep the password and do not use iam=1 (IAM
-- authentication then happens between the function and the proxy).
--
-- Variables (psql -v name=value), with their defaults:
--   owner_role      hookclaim_owner   owns the schema and its tables; migrates
--   app_role        hookclaim_app     SELECT/INSERT/UPDATE/DELETE on them (SELECT only on
--                                     hookclaim_schema_migrations); both functions' work
--   schema          hookclaim         where hookclaim's tables live (each role's search_path)
--   owner_password  (required)
--   app_password    (required unless iam=1)
--   iam             0
--
-- Nothing here gives the application role CREATE anywhere. On PostgreSQL 14 and older every
-- role may still create in the public schema unless that is revoked database-wide
-- (REVOKE CREATE ON SCHEMA public FROM PUBLIC); hookclaim never needs it.

\set ON_ERROR_STOP on

\if :{?owner_role}
\else
  \set owner_role hookclaim_owner
\endif
\if :{?app_role}
\else
  \set app_role hookclaim_app
\endif
\if :{?schema}
\else
  \set schema hookclaim
\endif
\if :{?iam}
\else
  \set iam 0
\endif
\if :{?owner_password}
\else
  \echo 'sql/roles.sql: give -v owner_password=... (the owner role logs in with it)'
  \quit 3
\endif

BEGIN;

-- The roles, created when missing; logins (re)set every run.
SELECT format('CREATE ROLE %I', :'owner_role')
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'owner_role') \gexec
SELECT format('CREATE ROLE %I', :'app_role')
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'app_role') \gexec

ALTER ROLE :"owner_role" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD :'owner_password';
\if :iam
  ALTER ROLE :"app_role" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD NULL;
  GRANT rds_iam TO :"app_role";
\else
  \if :{?app_password}
  \else
    \echo 'sql/roles.sql: give -v app_password=... (or -v iam=1 for IAM authentication)'
    \quit 3
  \endif
  ALTER ROLE :"app_role" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD :'app_password';
\endif

-- The administrator acts for the owner below (creating its schema, setting its default
-- privileges), which PostgreSQL 16 and later allow only to members of the role.
GRANT :"owner_role" TO CURRENT_USER;

SELECT format('GRANT CONNECT ON DATABASE %I TO %I, %I',
              current_database(), :'owner_role', :'app_role') \gexec

-- hookclaim's own schema, owned by the owner: the migrations create their tables there.
CREATE SCHEMA IF NOT EXISTS :"schema" AUTHORIZATION :"owner_role";
ALTER SCHEMA :"schema" OWNER TO :"owner_role";
ALTER ROLE :"owner_role" SET search_path = :"schema";
ALTER ROLE :"app_role" SET search_path = :"schema";

-- Data rights for the application role: on the tables the owner makes from now on (every
-- migration, the processor's setup), and on any already there. USAGE on the schema, never
-- CREATE.
GRANT USAGE ON SCHEMA :"schema" TO :"app_role";
ALTER DEFAULT PRIVILEGES FOR ROLE :"owner_role" IN SCHEMA :"schema"
  GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO :"app_role";
ALTER DEFAULT PRIVILEGES FOR ROLE :"owner_role" IN SCHEMA :"schema"
  GRANT USAGE, SELECT ON SEQUENCES TO :"app_role";
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA :"schema" TO :"app_role";
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA :"schema" TO :"app_role";
-- Except the record of applied migrations, which only the owner writes (the migration that
-- creates it takes back what the default privileges above give; this covers a run of this
-- script after the first migration).
SELECT format('REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON %I.hookclaim_schema_migrations FROM %I',
              :'schema', :'app_role')
 WHERE to_regclass(format('%I.hookclaim_schema_migrations', :'schema')) IS NOT NULL \gexec

-- Server-side timeouts for connections that cannot send them at startup (DATABASE_POOLED=true:
-- RDS Proxy, PgBouncer). They match DATABASE_STATEMENT_TIMEOUT_MS's default (5000) and the
-- idle-in-transaction bound hookclaim uses on direct connections (4 times that).
ALTER ROLE :"app_role" SET statement_timeout = '5s';
ALTER ROLE :"app_role" SET idle_in_transaction_session_timeout = '20s';
ALTER ROLE :"owner_role" SET statement_timeout = '5s';
ALTER ROLE :"owner_role" SET idle_in_transaction_session_timeout = '20s';

COMMIT;

\echo 'hookclaim roles ready:' :owner_role '(owner, migrations)' and :app_role '(application, data only)' in schema :schema
