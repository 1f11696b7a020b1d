module github.com/moraine-data/moraine/query

go 1.26
