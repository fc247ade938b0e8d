-- What the runtime role may do: the one place these grants are written. `runbook-bot db
-- upgrade` runs this file after the migrations, connected as the owner role
-- (database_migration_url), for the user of database_url; the Helm chart's migrations Job
-- does exactly that, and tests/test_database_roles.py checks the result on PostgreSQL.
-- {schema} and {role} are quoted identifiers. Every statement is idempotent: the file
-- runs after every upgrade, so tables a migration adds are granted too.
--
-- The runtime role owns nothing: only an owner may ALTER TABLE ... DISABLE TRIGGER or drop
-- the append-only triggers. It may only INSERT and SELECT the incident log and the stored
-- runbook documents (neither is ever updated or deleted), and only read the schema
-- revision.
REVOKE ALL ON ALL TABLES IN SCHEMA {schema} FROM {role};
REVOKE ALL ON ALL SEQUENCES IN SCHEMA {schema} FROM {role};
GRANT USAGE ON SCHEMA {schema} TO {role};
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role};
REVOKE UPDATE, DELETE ON {schema}.incident_log, {schema}.runbook_versions FROM {role};
REVOKE INSERT, UPDATE, DELETE ON {schema}.alembic_version FROM {role};
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {schema} TO {role};
