package harness

// ScenarioResult gathers the runs of one scenario: one per mode, and the
// baselines (quiet tenants only) where the scenario has them.
type ScenarioResult struct {
	Scenario  Scenario
	Runs      map[Mode]*Result
	Baselines map[Mode]*Result
}

// Add files a run under its mode.
func (s *ScenarioResult) Add(r *Result) {
	if s.Runs == nil {
		s.Runs, s.Baselines = map[Mode]*Result{}, map[Mode]*Result{}
	}
	if r.Baseline {
		s.Baselines[r.Mode] = r
	} else {
		s.Runs[r.Mode] = r
	}
}
