package nftworker

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/moraine-data/moraine/pkg/nftmeta"
	"github.com/moraine-data/moraine/pkg/obs"
)

type metrics struct {
	results       *prometheus.CounterVec
	requests      *prometheus.CounterVec
	retries       *prometheus.CounterVec
	fetchDuration *prometheus.HistogramVec
	stage         *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := obs.NewMetrics(reg, "processor")
	m := &metrics{
		results: f.CounterVec("nft_metadata_results_total",
			"Attempts of NFT metadata fetches by the indexStatus stored (deferred: a busy host, nothing stored).", "status"),
		requests: f.CounterVec("nft_metadata_requests_total",
			"NFT metadata requests by what the worker did: fetched, skipped (fetched before, or superseded), deferred (busy host), undecodable.", "result"),
		retries: f.CounterVec("nft_metadata_retries_scheduled_total",
			"NFT metadata attempts put on a retry level, by the status of the failed attempt (deferred: a busy host).", "status"),
		fetchDuration: f.HistogramVec("nft_metadata_fetch_duration_seconds", "Time of one metadata document fetch, by URI scheme.",
			prometheus.ExponentialBuckets(0.001, 2, 16), "scheme"),
		stage: f.HistogramVec("nft_metadata_batch_duration_seconds", "Time per metadata worker batch, cumulative by stage (state, node, fetch, total).",
			prometheus.ExponentialBuckets(0.001, 2, 18), "stage"),
	}
	for _, s := range nftmeta.Statuses {
		m.results.WithLabelValues(s)
	}
	m.results.WithLabelValues("deferred")
	for _, s := range []string{nftmeta.StatusThrottledTokenURI, nftmeta.StatusUnreachableTokenURI, nftmeta.StatusUnindexed, nftmeta.StatusIndexed, "deferred"} {
		m.retries.WithLabelValues(s)
	}
	for _, r := range []string{"fetched", "skipped", "deferred", "undecodable"} {
		m.requests.WithLabelValues(r)
	}
	for _, s := range []string{"http", "https", "ipfs", "data", "other"} {
		m.fetchDuration.WithLabelValues(s)
	}
	for _, s := range []string{"state", "node", "fetch", "total"} {
		m.stage.WithLabelValues(s)
	}
	return m
}
