module github.com/moraine-data/moraine/schemas

go 1.26
