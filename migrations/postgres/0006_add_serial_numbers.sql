-- Serial numbers (README, "Serial numbers"): a sequence with a `format`
-- issues formatted serials whose counter starts again every `reset` period
-- in `time_zone`; `format` NULL is a plain sequence, as every existing row.
-- Each period's counter is a row of this table named `name@key` (e.g.
-- `order@20261130`), created on first use: `name` widens by '@' and an
-- 8-digit key (128 + 1 + 8). `counter_start` is where every period's counter
-- starts (the `start` given at create). Additive: existing rows are plain.
ALTER TABLE sequences ALTER COLUMN name TYPE VARCHAR(137);
ALTER TABLE sequences
    ADD COLUMN format VARCHAR(64),
    ADD COLUMN reset VARCHAR(8) NOT NULL DEFAULT 'never'
        CONSTRAINT sequences_reset CHECK (reset IN ('never', 'day', 'month', 'year')),
    ADD COLUMN time_zone VARCHAR(64) NOT NULL DEFAULT 'UTC',
    ADD COLUMN overflow VARCHAR(8) NOT NULL DEFAULT 'refuse'
        CONSTRAINT sequences_overflow CHECK (overflow IN ('refuse', 'widen')),
    ADD COLUMN counter_start BIGINT NOT NULL DEFAULT 1
        CONSTRAINT sequences_counter_start CHECK (counter_start >= 1);
