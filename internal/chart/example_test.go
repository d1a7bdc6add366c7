package chart_test

import (
	"fmt"

	"github.com/fairq/fairq/internal/chart"
)

func ExampleSeconds() {
	for _, s := range []float64{0.02, 5, 600, 7200} {
		fmt.Println(chart.Seconds(s))
	}
	// Output:
	// 20 ms
	// 5 s
	// 10 min
	// 2 h
}
