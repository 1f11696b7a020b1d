package usageapi

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
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
		// Half of the histogram sparse (sumMap), half dense (sumForEach), as
		// the per-key rollups hold rows from before and after migration 15.
		var buckets []uint8
		for b := range hist {
			buckets = append(buckets, b)
		}
		sort.Slice(buckets, func(i, j int) bool { return buckets[i] < buckets[j] })
		var sparse, counts []string
		var dense []uint64
		for _, b := range buckets {
			sparse = append(sparse, fmt.Sprint(b))
			counts = append(counts, fmt.Sprint(hist[b]/2))
			for len(dense) <= int(b) {
				dense = append(dense, 0)
			}
			dense[b] = hist[b] - hist[b]/2
		}
		h, err := histogram(strings.ReplaceAll(fmt.Sprint(dense), " ", ","), "["+strings.Join(sparse, ",")+"]", "["+strings.Join(counts, ",")+"]")
		require.NoError(t, err)
		want := us[(n-1)/2] / 1000
		got := medianMs(h)
		if us[(n-1)/2] >= 100 { // below 0.1 ms everything is bucket 0
			require.InEpsilon(t, want, got, 0.09, "n=%d", n)
		}
	}
	h, err := histogram("[]", "[]", "[]")
	require.NoError(t, err)
	require.Zero(t, medianMs(h))
	h, err = histogram("[1]", "[2]", "[5]")
	require.NoError(t, err)
	require.Equal(t, []uint64{1, 0, 5}, h)
	for _, bad := range [][3]string{{"1,2", "[]", "[]"}, {"[]", "[1,2]", "[3]"}, {"[]", "[300]", "[1]"}, {"[x]", "[]", "[]"}} {
		_, err := histogram(bad[0], bad[1], bad[2])
		require.Error(t, err, "%q", bad)
	}
}
