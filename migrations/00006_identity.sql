-- +goose Up

-- boot_id: the boot of the machine the job ran in (Linux: the kernel's
-- random boot_id). Pids and start times name processes only within one
-- boot: a job recorded in another boot is matched to no process, so kill
-- and the counts of live processes never reach a stranger after a reboot.
-- NULL for jobs recorded before it was kept.
ALTER TABLE jobs ADD COLUMN boot_id TEXT;

-- end_ticks: when the job ended, on the clock pid_start uses (Linux: clock
-- ticks since boot). A process of the job's group that started later is a
-- stranger that reused the group id, not the job's.
ALTER TABLE jobs ADD COLUMN end_ticks INTEGER CHECK (end_ticks IS NULL OR end_ticks >= 0);

-- +goose Down
ALTER TABLE jobs DROP COLUMN end_ticks;
ALTER TABLE jobs DROP COLUMN boot_id;
