package sim

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/fairq/fairq/sharding"
)

// WriteTable writes the sweep for people: what each column means, then
// for each tenant count and number of noisy tenants one row per pool and
// the recommended pool.
func (r *SweepResult) WriteTable(w io.Writer) error {
	c := r.Config
	var b strings.Builder
	fmt.Fprintf(&b, "fairq-sim sweep: seed %d; shuffle shards, each message to the shallowest queue of its tenant's shard.\n", c.Seed)
	fmt.Fprintf(&b, "expected     the share of quiet tenants whose whole shard lies among the m noisy tenants' shards together, exactly:\n")
	fmt.Fprintf(&b, "             Σ_{i=0..k} (−1)^i C(k,i) (C(N−i,k)/C(N,k))^m, which is 1/C(N,k) for one noisy tenant\n")
	if !c.NoSimulation {
		fmt.Fprintf(&b, "drawn        the quiet tenants of the simulation whose ids hash to such a shard\n")
		fmt.Fprintf(&b, "simulated    the quiet tenants the simulation hurt (p99 over %s× their p99 without the noisy tenants): quiet tenants\n", num(HurtDefault))
		fmt.Fprintf(&b, "             at %s msg/s for %s, consumers at %s× their load, the noisy tenants together at %s× the consumers'\n",
			num(c.QuietRate), c.Duration, num(CapacityDefault), num(sweepOverload))
		fmt.Fprintf(&b, "             capacity, shared so that every queue they cover grows without bound. More are hurt than drawn where\n")
		fmt.Fprintf(&b, "             the queues left free cannot carry the quiet load: the consumers take the queues in turn, so the free\n")
		fmt.Fprintf(&b, "             ones get their number ÷ N of the consumers, under half when the noisy tenants cover half the pool\n")
	}
	fmt.Fprintf(&b, "recommended  the fewest queues N (the worker polls each) whose expected share is at most %s, for k ≤ %d and N ≤ %d;\n",
		share(c.Tolerance), c.MaxShardSize, c.MaxQueues)
	fmt.Fprintf(&b, "             and the consumers it needs: the quiet load ÷ the share of the queues the noisy tenants leave free\n")
	for _, g := range r.Groups {
		q := g.Quiet()
		fmt.Fprintf(&b, "\n%d tenants, %d noisy (%s):\n", g.Tenants, g.Noisy, share(float64(g.Noisy)/float64(g.Tenants)))
		tw := tabwriter.NewWriter(&b, 2, 8, 3, ' ', 0)
		fmt.Fprintf(tw, "  N\tk\tshards C(N,k)\texpected")
		if !c.NoSimulation {
			fmt.Fprintf(tw, "\tdrawn\tsimulated")
		}
		fmt.Fprintln(tw)
		for _, p := range g.Pools {
			e, _ := p.Expected.Float64()
			fmt.Fprintf(tw, "  %d\t%d\t%s\t%s (%s of %d)", p.Queues, p.ShardSize, digitGroups(sharding.Binomial(p.Queues, p.ShardSize).String()), share(e), expected(e*float64(q)), q)
			if p.Hurt >= 0 {
				fmt.Fprintf(tw, "\t%d\t%d of %d (%s)", p.Drawn, p.Hurt, q, share(float64(p.Hurt)/float64(q)))
			}
			fmt.Fprintln(tw)
		}
		_ = tw.Flush() // into a strings.Builder: it cannot fail
		if !g.Found {
			fmt.Fprintf(&b, "  recommended: none; no pool of up to %d queues keeps the expected share within %s\n", c.MaxQueues, share(c.Tolerance))
			continue
		}
		e, _ := g.Recommended.Expected.Float64()
		fewest := make([]string, len(g.Fewest))
		for i, s := range g.Fewest {
			fewest[i] = fmt.Sprintf("k=%d N=%d", s.ShardSize, s.Queues)
		}
		rec := g.Recommended
		free := FreeShare(rec.Queues, rec.ShardSize, g.Noisy)
		fmt.Fprintf(&b, "  recommended: N=%d, k=%d, %s expected; the noisy tenants leave %s of its queues free, so the consumers need\n",
			rec.Queues, rec.ShardSize, share(e), share(free))
		fmt.Fprintf(&b, "  %.3g× the quiet load or more; the fewest queues for each k: %s\n", 1/free, strings.Join(fewest, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// share formats a share as a percentage of at most three significant
// digits, without an exponent: "0.0202%", "3.57%", "1%", "100%".
func share(x float64) string {
	p := 100 * x
	if p <= 0 || math.IsNaN(p) || math.IsInf(p, 0) {
		return strconv.FormatFloat(p, 'g', -1, 64) + "%"
	}
	digits := max(0, 2-int(math.Floor(math.Log10(p))))
	s := strconv.FormatFloat(p, 'f', digits, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s + "%"
}
