module github.com/moraine-data/moraine/processor

go 1.26
