module github.com/moraine-data/moraine/e2e

go 1.26
