#!/bin/true
