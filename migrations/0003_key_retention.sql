-- Keys that outlive their payloads. A source whose signatures carry no checked timestamp
-- (GitHub, a generic HMAC, a static token, Twilio) signs a request that stays valid for as long
-- as the secret does: a captured request replayed later is refused only while its key is
-- remembered. Such rows keep their key for KEY_RETENTION_DAYS, while their payload goes at
-- RETENTION_DAYS like every other row's. The webhook sets the flag from the source's settings
-- when it inserts the row; rows received before this migration keep RETENTION_DAYS.
--
-- A constant default adds the column without rewriting the table.
ALTER TABLE hookclaim_deliveries
    ADD COLUMN key_outlives_payload boolean NOT NULL DEFAULT false;

-- Purge and trim walk each kind of row by age in an index of its own, so a run purging rows at
-- RETENTION_DAYS never steps over the kept keys between RETENTION_DAYS and KEY_RETENTION_DAYS.
-- Every finished row is in exactly one of the two: a new delivery still pays for one entry.
-- (Building them holds off writes to the table for as long as the build takes: seconds per
-- million finished rows. Run the migration when that pause is acceptable.)
DROP INDEX IF EXISTS hookclaim_deliveries_finished_idx;
CREATE INDEX hookclaim_deliveries_finished_idx
    ON hookclaim_deliveries (completed_at)
    WHERE status IN ('done', 'dead') AND NOT key_outlives_payload;
CREATE INDEX hookclaim_deliveries_kept_keys_idx
    ON hookclaim_deliveries (completed_at)
    WHERE status IN ('done', 'dead') AND key_outlives_payload;

-- Dead rows that still hold their payload: few (they are failures), and the only rows whose
-- payloads TRIM_DEAD_PAYLOAD_AFTER_DAYS drops. A delivery enters it only when it becomes dead.
CREATE INDEX hookclaim_deliveries_dead_payloads_idx
    ON hookclaim_deliveries (completed_at)
    WHERE status = 'dead' AND payload IS NOT NULL;
