package plan

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDefaultsMatchTheContract(t *testing.T) {
	s := Defaults()
	for _, tc := range []struct {
		name        string
		min, day    int64
		addrPerHook int
	}{
		{Unauthenticated, 6_000, 1_200_000, 0},
		{Free, 8_000, 2_000_000, 5},
		{Base, 10_000, 3_750_000, 25},
		{Growth, 14_000, 11_200_000, 100},
		{Pro, 20_000, 25_000_000, 1_000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, ok := s.Get(tc.name)
			require.True(t, ok)
			require.Equal(t, tc.name, p.Name)
			require.Equal(t, tc.min, p.CUPerMinute)
			require.Equal(t, tc.day, p.CUPerDay)
			require.Equal(t, tc.addrPerHook, p.AddressesPerWebhook)
		})
	}
	require.Len(t, s.All(), 7)
	require.Equal(t, Free, s.GetOrFree(Free).Name)
	// An unknown plan is limited like free, never unlimited.
	require.Equal(t, int64(8_000), s.GetOrFree("legacy").CUPerMinute)
}

func TestParseOverrides(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		wantErr string
		check   func(t *testing.T, s *Set)
	}{
		{
			name: "field by field",
			in:   `{"plans":{"enterprise":{"cuPerMinute":1,"cuPerDay":2},"base":{"addressesPerWebhook":50}}}`,
			check: func(t *testing.T, s *Set) {
				e, _ := s.Get(Enterprise)
				require.Equal(t, int64(1), e.CUPerMinute)
				require.Equal(t, 100_000, e.AddressesPerWebhook)
				b, _ := s.Get(Base)
				require.Equal(t, 50, b.AddressesPerWebhook)
				require.Equal(t, int64(10_000), b.CUPerMinute)
			},
		},
		{name: "unknown plan", in: `{"plans":{"gold":{}}}`, wantErr: `unknown plan "gold"`},
		{name: "unknown field", in: `{"plans":{"free":{"cuPerHour":1}}}`, wantErr: "unknown field"},
		{name: "negative", in: `{"plans":{"free":{"cuPerDay":-1}}}`, wantErr: "must not be negative"},
		{name: "zero addresses", in: `{"plans":{"free":{"addressesPerWebhook":0}}}`, wantErr: "must be positive"},
		{name: "not json", in: `plans`, wantErr: "invalid character"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse([]byte(tc.in))
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			tc.check(t, s)
		})
	}
}
