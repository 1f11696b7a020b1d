module github.com/moraine-data/moraine/ingest

go 1.26
