-- The identity of the stripe set this database belongs to (docs/high-availability.md):
-- 32 hex digits written on every stripe of a set when the set is first used or by
-- `seqd stripes init`, the same on all of them. A start refuses URLs whose records
-- carry different set_ids (stripes of two separately set-up sets). NULL on records
-- written before it existed; the first start of this version records it.
-- Additive: nothing else changes.
ALTER TABLE seqd_stripe ADD COLUMN set_id VARCHAR(64) NULL;
