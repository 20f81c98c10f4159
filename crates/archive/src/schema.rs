//! The archive's schema as a list of migrations: step k takes a file from version k to k + 1, and a new
//! file runs them all. Never edit a step that has shipped; add one.

/// The version a fully migrated archive has.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

pub const MIGRATIONS: [&str; 3] = [
    // 1: runs with their result and the columns `history` filters on.
    "CREATE TABLE runs (
        id INTEGER PRIMARY KEY,
        started_unix_s REAL NOT NULL,
        started_utc TEXT NOT NULL,
        host TEXT NOT NULL,
        port INTEGER NOT NULL,
        protocol TEXT NOT NULL,
        direction TEXT NOT NULL,
        streams INTEGER NOT NULL,
        throughput_bps REAL NOT NULL,
        bytes_received INTEGER NOT NULL,
        result_json TEXT NOT NULL
     );
     CREATE INDEX runs_host ON runs(host);
     CREATE INDEX runs_started ON runs(started_unix_s);",
    // 2: transport, window, tags and sweeps; existing rows get transport and window from their JSON.
    "CREATE TABLE sweeps (
        id INTEGER PRIMARY KEY,
        created_utc TEXT NOT NULL,
        host TEXT NOT NULL,
        plan_json TEXT NOT NULL,
        status TEXT NOT NULL DEFAULT 'running'
     );
     ALTER TABLE runs ADD COLUMN transport TEXT NOT NULL DEFAULT 'tcp';
     ALTER TABLE runs ADD COLUMN window_bytes INTEGER;
     ALTER TABLE runs ADD COLUMN tag TEXT;
     ALTER TABLE runs ADD COLUMN sweep_id INTEGER REFERENCES sweeps(id);
     ALTER TABLE runs ADD COLUMN cell_repeat INTEGER;
     UPDATE runs SET
        transport = coalesce(json_extract(result_json, '$.config.transport'), 'tcp'),
        window_bytes = json_extract(result_json, '$.config.window_bytes');
     CREATE INDEX runs_tag ON runs(tag);
     CREATE INDEX runs_sweep ON runs(sweep_id);
     CREATE UNIQUE INDEX runs_cell ON runs(sweep_id, window_bytes, streams, direction, cell_repeat)
        WHERE sweep_id IS NOT NULL;",
    // 3: mesh campaigns; a run made by a third-party order names its campaign and its sending host.
    "CREATE TABLE campaigns (
        id INTEGER PRIMARY KEY,
        created_utc TEXT NOT NULL,
        name TEXT NOT NULL,
        plan_json TEXT NOT NULL,
        report_json TEXT,
        status TEXT NOT NULL DEFAULT 'running'
     );
     ALTER TABLE runs ADD COLUMN campaign_id INTEGER REFERENCES campaigns(id);
     ALTER TABLE runs ADD COLUMN from_host TEXT;
     CREATE INDEX runs_campaign ON runs(campaign_id);",
];
