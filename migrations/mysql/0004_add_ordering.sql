-- How a sequence orders its IDs (README, Guarantees): 'instance' (the
-- default: segments in memory, IDs increasing within each instance) or
-- 'global' (every ID reserved in the database at request time, concurrent
-- requests of an instance merged into one reservation: IDs increase across
-- all instances in real-time order). Additive: rows keep 'instance'.
ALTER TABLE sequences ADD COLUMN ordering VARCHAR(8) NOT NULL DEFAULT 'instance',
    ADD CONSTRAINT sequences_ordering CHECK (ordering IN ('instance', 'global'));
