// Package config loads and validates the YAML configuration of DESIGN.md §7
// and its FAIRQ_ environment overrides. Only cmd/fairq calls it; every other
// package takes its own Config built from this one.
package config
