module github.com/moraine-data/moraine/deploy

go 1.26
