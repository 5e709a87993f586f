-- +goose Up

-- tmux_socket: the tmux server a tmux job runs on, as JOBS_TMUX_SOCKET
-- named it when the job started (a name for tmux -L, or a path for -S);
-- '' for tmux's default server. Every later step (capture, attach, keys,
-- kill, the end) talks to this server, whatever the environment of the
-- process taking it. NULL for jobs recorded before it was kept: those use
-- the environment, as they did.
ALTER TABLE jobs ADD COLUMN tmux_socket TEXT;

-- +goose Down
ALTER TABLE jobs DROP COLUMN tmux_socket;
