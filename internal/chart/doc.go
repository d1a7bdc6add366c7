// Package chart is how fairq draws its PNG charts, on gonum/plot: the
// simulator's (package sharding/sim) and the load test reports' (package
// loadtest/harness). It holds what the two share: the colour palette, a
// logarithmic axis of durations, whole-number ticks, the style of titles
// and legends, and a Figure that lays plots out side by side on a white
// PNG. What each chart shows stays with the package that owns the data.
//
// Only commands that draw import it (cmd/fairq-sim, the load test
// commands): the server binary does not link gonum/plot.
package chart
