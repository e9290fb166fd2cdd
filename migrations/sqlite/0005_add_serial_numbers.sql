-- Serial numbers (README, "Serial numbers"): a sequence with a `format`
-- issues formatted serials whose counter starts again every `reset` period
-- in `time_zone`; `format` NULL is a plain sequence, as every existing row.
-- Each period's counter is a row of this table named `name@key` (e.g.
-- `order@20261130`), created on first use (SQLite does not enforce the
-- width of `name`, which the other backends widen to 137). `counter_start`
-- is where every period's counter starts (the `start` given at create).
-- Additive: existing rows are plain.
ALTER TABLE sequences ADD COLUMN format VARCHAR(64);
ALTER TABLE sequences ADD COLUMN reset TEXT NOT NULL DEFAULT 'never'
    CHECK (reset IN ('never', 'day', 'month', 'year'));
ALTER TABLE sequences ADD COLUMN time_zone TEXT NOT NULL DEFAULT 'UTC';
ALTER TABLE sequences ADD COLUMN overflow TEXT NOT NULL DEFAULT 'refuse'
    CHECK (overflow IN ('refuse', 'widen'));
ALTER TABLE sequences ADD COLUMN counter_start BIGINT NOT NULL DEFAULT 1
    CHECK (counter_start >= 1);
