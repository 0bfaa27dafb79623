-- The plans that matter, printed by auto_explain as NOTICEs (benches/recovery.py runs this in
-- one session, then the rounds of probe-round.sql six times, so PL/pgSQL's cached plans are the
-- ones a long-lived connection uses, then rolls back: the scenario is left as it was).
LOAD 'auto_explain';
SET auto_explain.log_min_duration = 0;
SET auto_explain.log_nested_statements = on;
SET auto_explain.log_analyze = on;
SET auto_explain.log_timing = off;
SET auto_explain.log_level = notice;
SET client_min_messages = notice;
BEGIN;
