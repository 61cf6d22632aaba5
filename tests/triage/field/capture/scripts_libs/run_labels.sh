#!/bin/bash
set -e
./labels
