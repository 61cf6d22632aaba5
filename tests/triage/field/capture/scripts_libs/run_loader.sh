#!/bin/bash
set -e
./loader
