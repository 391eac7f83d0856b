package pgsched

// SetOnOutcome makes a worker built from cfg call f with every outcome it
// records, so tests wait on events rather than poll the database.
func SetOnOutcome(cfg *WorkerConfig, f func(Outcome)) { cfg.onOutcome = f }
