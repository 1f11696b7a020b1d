module github.com/moraine-data/moraine/delivery

go 1.26
