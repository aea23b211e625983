"""HTTP edge: parse the request, call the service, serialise the answer in OJS shapes."""
