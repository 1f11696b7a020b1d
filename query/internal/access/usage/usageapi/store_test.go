package usageapi

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMedianFromHistogram: the median read from the durations histogram
// (migration *_api_usage_and_operations' buckets) is within 9% of the true one.
func TestMedianFromHistogram(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		n := 1 + rng.IntN(5000)
		us := make([]float64, n)
		hist := map[uint8]uint64{}
		for i := range us {
			us[i] = math.Exp(rng.NormFloat64()*1.5 + 7) // log-normal around 1 ms
			b := uint8(min(63, max(0, math.Floor(4*math.Log2(us[i]/100)))))
			hist[b]++
		}
		sort.Float64s(us)
		var buckets []uint8
		for b := range hist {
			buckets = append(buckets, b)
		}
		sort.Slice(buckets, func(i, j int) bool { return buckets[i] < buckets[j] })
		counts := make([]uint64, len(buckets))
		for i, b := range buckets {
			counts[i] = hist[b]
		}
		want := us[(n-1)/2] / 1000
		got := medianMs(buckets, counts)
		if us[(n-1)/2] >= 100 { // below 0.1 ms everything is bucket 0
			require.InEpsilon(t, want, got, 0.09, "n=%d", n)
		}
	}
	require.Zero(t, medianMs(nil, nil))
}
