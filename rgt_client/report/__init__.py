"""`rgt-client report`: a run's whole life as one offline HTML file (inline SVG charts)."""
